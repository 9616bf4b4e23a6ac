from coordtest import *
backing = sys.argv[1]
write('y', 'data')
t('rename into backing', os.rename, 'y', backing + '/y')
t('link into backing', os.link, 'y', backing + '/y2')
os.unlink('y')
